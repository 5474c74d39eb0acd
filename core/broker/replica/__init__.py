"""The partition replicas hosted by this broker.

``partition`` is one replica (role, leader epoch, ISR, high watermark, its log);
``manager`` holds them all and serves appends (acks 0/1/all) and fetches; ``delayed``
parks waiters (acks=all, long-poll reads) until an append or a high-watermark move wakes
them; ``fetcher`` is the follower side (one loop per leader broker) and ``fetch_wire``
its binary format; ``batch_cache`` keeps recently read batches decoded.
"""
