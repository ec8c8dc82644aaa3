"""Annotation queues: building them from a list filter and handing out items.

Contract used by other pages (the queues helper implements it):
- `claim_next(queue, user) -> Trajectory | None`: the next item for `user`, never handing an
  item out more than `queue.overlap` times nor twice to the same person.
- `complete(queue, user, trajectory) -> None`: mark `user`'s assignment of it done.
"""
