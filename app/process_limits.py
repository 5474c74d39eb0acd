"""Process-wide resource limits a broker raises before it opens anything.

The soft ``RLIMIT_NOFILE`` (often 1,024) is raised to the hard limit, as Kafka's
start scripts and systemd units do: every HTTP connection holds a descriptor, and the
cache of open segment files (``log.segment.open.files.max``, ``core.storage.fd_cache``)
is sized from the raised limit (half of it by default). Partitions hold none of their
own, so the partition budget (``core.broker.controller.partition_limits``) is bounded
by memory mappings instead.
"""

from __future__ import annotations

import logging
import resource

log = logging.getLogger(__name__)


def raise_open_files_limit() -> int:
    """Raise the soft open-files limit to the hard one; the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:  # e.g. above fs.nr_open
            log.warning("could not raise the open-files limit from %d to %d: %s",
                        soft, target, exc)
    return soft
