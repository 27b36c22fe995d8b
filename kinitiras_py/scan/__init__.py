"""The background scan: validate and override policies evaluated against the objects that exist.

``plans`` decides which rules a scan can evaluate (those reading request-only data are reported
``skip``), ``evaluation`` runs the others through the webhook's pipeline, ``kinds`` maps selectors to
the resources to watch, ``feed`` keeps an informer per resource, ``scanner`` schedules the work and
hands results to a :class:`~kinitiras_py.scan.sink.ReportSink`, ``metrics`` exports its progress.
"""
