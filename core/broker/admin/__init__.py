"""What operators set, see and change: the broker's properties (``broker_config``) and
topic administration (``topic_admin``)."""
