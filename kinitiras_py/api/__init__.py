"""Data only: the policy models of ``policy.kcloudlabs.io/v1alpha1``, their parser and their CRDs.

Each type is declared once (``schema``); the parser with field-path errors and the structural
OpenAPI schema both derive from that declaration. Entry points are in ``policies``
(``parse_policy``, ``is_policy``, ``policy_ref``, ``KINDS``) and ``crds`` (``build_crds``,
``write_crds``). Nothing here evaluates policies (``engine``) or talks to a cluster.
"""
