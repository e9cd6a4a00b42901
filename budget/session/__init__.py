"""The session's room: ``Budget`` (``_budget``) and the parts a request passes through.

The history scanned and cached (``_history``), the staleness candidates (``_candidates``), the
passes' turn (``_passrun``), the bodies stored (``_bodies``), the decision log (``_journal``), the
request copy (``_copies``) and the request's records and report (``_outcome``). Nothing is
exported here: ``budget`` exports ``Budget``.
"""
