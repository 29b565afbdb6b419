"""``balanced``: goal-based balancing with few moves (see :mod:`assigners.balanced.strategy`).

Layers, each importing only those below: ``state`` (the layout and its
rules) <- ``actions`` (options and their cost) <- ``goals`` (one goal worked
off its most loaded broker) and ``undo`` <- ``strategy`` (the goals in turn).
"""

from assigners.balanced.strategy import STRATEGY, assign

__all__ = ["STRATEGY", "assign"]
