"""Pages of the annotation workspace, one module per page family; each module lists its `urls`."""
