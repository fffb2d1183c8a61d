"""secretferry.reconcile.rendering — from fetched values to the data a target holds.

Everything between "the service answered" and "this is the Secret we want" that computes over
values, and so must stay bounded whatever a tenant writes::

    rewrite      key rewriting rules (RE2, bounded), applied before templates; collisions named
    decoding     a source's decodingStrategy / per-key glob rules, applied after rewrite
    binary       values that are text or bytes; base64 decoding by strategy (Base64/URL/Auto)
    template_sources  templateFrom: which template texts, from which labelled ConfigMaps/Secrets,
                 merged with inline data in a fixed order; named failures (the security decision)
    templating   the Jinja sandbox: filters, limits, value-free error messages
    pool         templates rendered off the event loop in worker processes (the shared pool)
    child        the parent's handle on one worker process: request in, frames out, deadline
    worker       the worker process itself (CPU, memory and output limits, niced)
    quarantine   which failures hold a template back, and for how long
    fairness     who gets a freed slot: the namespace served least recently

Import direction (import-linter, "Layers inside reconcile"): pool → child/quarantine/fairness →
worker → templating → binary. ``desired`` (one level up) is the only caller of the pool, of
rewrite and of decoding; ``template_sources`` sits beside them: pure but for the reader it is
handed (the pass resolves with it, through template_intake; ``desired`` renders the texts it
returns).
"""
