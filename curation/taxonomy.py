"""The error taxonomy every new project starts with; each project may edit its own copy."""

from __future__ import annotations

DEFAULT_ERROR_TAXONOMY: tuple[tuple[str, str], ...] = (
    ("misunderstood_task", "Acted on a wrong reading of what the user or task asked for."),
    ("wrong_plan", "Chose a plan that cannot reach the goal."),
    ("fabricated_information", "Stated facts, values or results that no source gave."),
    ("wrong_tool", "Called a tool that does not fit the step."),
    ("wrong_arguments", "Called the right tool with wrong or missing arguments."),
    ("wrong_order_or_missing_step", "Skipped a required step or did steps in the wrong order."),
    ("ignored_tool_output_or_error", "Went on as if a tool result or error said something else."),
    ("repeated_action_loop", "Repeated the same action without progress."),
    ("policy_violation", "Broke a rule of the system prompt or domain policy."),
    ("unconfirmed_side_effect", "Changed state (booked, cancelled, paid) without confirmation."),
    ("premature_termination", "Stopped or handed off before the task was done."),
    ("false_success_claim", "Claimed success that did not happen."),
    ("wrong_final_answer", "Gave a final answer that is wrong."),
    ("environment_or_tool_failure", "The environment or a tool failed, not the agent."),
    ("other", "None of the above; say what in the rationale."),
)


def default_error_taxonomy() -> list[dict[str, str]]:
    return [{"name": name, "description": text} for name, text in DEFAULT_ERROR_TAXONOMY]


def category_names(taxonomy: list) -> list[str]:
    """Names of a project's categories (entries may be {name, description} or plain names)."""
    return [entry["name"] if isinstance(entry, dict) else str(entry) for entry in taxonomy]
