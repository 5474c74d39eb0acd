"""Security without HTTP: principals, stored credentials, Kafka's ACL model and the
authorizer that decides, and the store of users and ACLs (SQL catalog standalone,
Kafka's znodes in a cluster). ``api.security`` turns requests into principals and asks
the authorizer; nothing here knows about HTTP."""
