"""The local control plane for development and tests (``kinitiras-py dev up|down|status``).

etcd, kube-apiserver and kube-controller-manager run on 127.0.0.1 from binaries built once from
Debian's ``kubernetes`` source package and cached outside the repository. Nothing on the
serving path imports this package.
"""
