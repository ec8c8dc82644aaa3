"""Teacher corrections by first-critical-error intervention (DESIGN.md section 6): the prefix
before the critical step is kept as recorded and a teacher writes the step again (mode
`step`) or goes on to the end with an environment answering its tool calls (mode
`rollout`). Only `runner` touches the database."""
