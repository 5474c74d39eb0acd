"""Who sent a request and whether they may: ``authentication`` (the middleware that turns
credentials or a client certificate into a principal) and ``authorization`` (the ACL
rule every route declares, checked before its handler runs)."""
