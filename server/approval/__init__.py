"""The approval gate of remediation: who may approve a plan, how, and the record of it.

- :mod:`server.approval.tokens`: approval tokens (``local`` HMAC or ``signature`` Ed25519),
  minted out of band, checked and consumed (one nonce per apply) by the server;
- :mod:`server.approval.keys`: approver key files and listed public keys (signature mode);
- :mod:`server.approval.trust`: the trust file the approver set comes from, and whether the
  agent could change it;
- :mod:`server.approval.audit`: the hash-chained, append-only audit log;
- :mod:`server.approval.cli` and :mod:`server.approval.audit_cli`: ``mesh-mcp approve``,
  ``approver init`` and ``audit verify``, the human side.

The remediation tools (:mod:`tools.remediation`) call the gate; the gate never imports
them, except its command line (``approve`` reads the stored plan it shows).
"""
