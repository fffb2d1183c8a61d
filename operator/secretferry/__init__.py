"""secretferry: keeps Kubernetes Secrets in step with an Infisical-compatible secrets service."""

# The one version of the project. pyproject.toml reads it (dynamic version), the Helm chart's
# version/appVersion, the Dockerfile's VERSION build-arg and CHANGELOG.md's latest release must
# equal it (tests/unit/test_version.py). CONTRIBUTING.md says how a release bumps it.
__version__ = "0.1.0"
