"""The export kinds by name."""

from __future__ import annotations

from curation.exports import preference, rl_prefix, sft, stepwise, unpaired
from curation.exports.base import Builder

BUILDERS: dict[str, Builder] = {
    b.name: b
    for b in (
        sft.BUILDER,
        preference.BUILDER,
        unpaired.BUILDER,
        stepwise.BUILDER,
        rl_prefix.BUILDER,
    )
}
