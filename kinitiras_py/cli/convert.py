"""``kinitiras-py convert FILE...``: print our policies for other admission systems' documents.

Exit codes: 0 every document converted exactly (documents of no foreign kind pass through
unchanged; one the source system ignores, such as a Mesh without App Mesh injection, is left out
with a note on stderr), 2 bad input or a field with no exact equivalent (each reported on stderr with its
field; nothing is printed), 3 an internal error.
"""

from __future__ import annotations

import argparse
import sys

from kinitiras_py.cli.offline import guarded


def register(sub: argparse._SubParsersAction) -> None:
    """Add the convert command."""
    p = sub.add_parser("convert", help="print kinitiras-py policies for foreign documents (PodPreset, ...)",
                       description="Convert documents of other admission systems into kinitiras-py policies "
                                   "and print them as YAML. Other documents pass through unchanged. Exit 2, "
                                   "printing nothing, when any field cannot be converted exactly.")
    p.add_argument("files", nargs="+", help="YAML files (- for stdin)")
    p.set_defaults(handler=guarded(_convert))


def _convert(args: argparse.Namespace) -> int:
    from kinitiras_py.convert.registry import convert_all, note_to_stderr
    from kinitiras_py.offline import loader
    from kinitiras_py.offline.dumper import dump_yaml_all

    documents, problems, notes = [], [], []
    for name in args.files:
        try:
            result = convert_all(loader.load_documents(name), name)
        except loader.InputError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        documents.extend(result.documents)
        problems.extend(result.problems)
        notes.extend(result.notes)
    if problems:
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    for note in notes:
        note_to_stderr(note)
    sys.stdout.write(dump_yaml_all(documents))
    return 0
