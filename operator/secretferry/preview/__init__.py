"""``secretferry template``: render a SecretSync against sample values, as the operator would.

A template is hard to get right against a live cluster and service: every attempt is an edit,
a sync, and a look at status. Here the user's SecretSync (a file, or live from the cluster with
their own kubeconfig) is rendered against values they supply, by the operator's own code in the
operator's own sandbox and limits (``render.py``), and the result is the Secret (values masked
unless asked: ``output.py``) or the reason and message the Ready condition would show.

    command  one run: inputs → render, a refusal as the Ready condition would hold it
    inputs   the SecretSync (file or live), sample values (YAML/JSON/dotenv, --set), templateFrom
             sources (--template-source files, or live)
    render   guards, templateFrom, desired.render_and_build in a RenderPool, target-name checks
    output   the target as YAML, masked

It talks to nothing but the apiserver (with ``--live``), and only with the user's credentials.
"""

from __future__ import annotations

from secretferry.preview.inputs import InputError

__all__ = ["InputError"]
