from django.dispatch import Signal

# Sent inside the import transaction with `project`, `trajectory_ids` and `records` (same order),
# so apps that keep labels (annotate) store a record's gold labels atomically with it.
trajectories_imported = Signal()
