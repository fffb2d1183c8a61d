"""The kubectl plugin ``kubectl-secretferry`` (cli.py), and the user's connection both command-line
tools share (connection.py).

    cli         status / why / sync, as ``kubectl secretferry ...``
    reads       each apiserver call, answering a value or ``Denied`` (RBAC refusals are shown)
    views       tables and the ``why`` report, pure over raw bodies
    clusterviews  the same for ClusterSecretSyncs (cluster-scoped: counts, failing namespaces)
    connection  the user's kubeconfig, as kubectl finds it (exec credential plugins too); never
                the operator's credentials

Where it sits: above the kube layer (its client and paths) and the models (the force-sync
annotation's name: ``models.labels``). Never ``reconcile``, ``handlers`` or ``service``
(it talks to nothing but the apiserver), never the operator's endpoints (pyproject.toml, "The
command-line tools").
"""
