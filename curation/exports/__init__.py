"""Curated dataset exports (DESIGN.md section 7): SFT, preference, unpaired, stepwise and
RL-prefix datasets in the formats TRL documents, streamed from the database into JSONL or
Parquet files with a manifest and a dataset card. `runner.run_export` executes one
`DatasetExport` row end to end; each kind is a small builder module."""
