"""kinitiras-py: a Kubernetes admission policy controller.

Policies (``policy.kcloudlabs.io/v1alpha1``) override and validate the objects entering a
cluster. The public surfaces are the ``kinitiras-py`` command line, the CRDs in ``api/`` and
the models in :mod:`kinitiras_py.api.policies`.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
