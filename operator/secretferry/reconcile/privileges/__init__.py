"""TemporaryPrivilege: an identity's additional privilege at the service, managed as a resource.

    wire      pure: the spec as the service's request bodies (v1 and v2 generations), and whether
              what the service holds differs from the spec
    report    pure: status (conditions Ready/Active, ids, window) from an outcome
    manager   the runtime: one small loop per TemporaryPrivilege (while this replica leads), its
              finalizer, the calls through the granter's session, the timer at the window's end

Why not the SecretSync machinery (queue, scopes, streams): privileges are few, are written rather
than read, and their one time-driven change (the end of the window) is known in advance.
"""
