"""Entry points and Spark / Delta I/O.

delta-rs logs through Rust's env_logger: without a level, an object store it cannot reach prints the cloud SDK's
retries as multi-line warnings on the terminal, before the one-line error the commands give. ``RUST_LOG=error``
keeps them off (set it to ``warn`` or ``debug`` to see them).
"""

import os

os.environ.setdefault("RUST_LOG", "error")
