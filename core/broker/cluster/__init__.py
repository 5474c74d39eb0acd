"""This broker in its cluster: ``router`` (serve a partition call here or forward it to
the leader), ``client`` (every call to another broker's internal API, errors translated
into domain errors), ``keepalive_http`` (the lean keep-alive HTTP/1.1 client all of those
calls go through) and ``topic_stats`` (client traffic per topic)."""
