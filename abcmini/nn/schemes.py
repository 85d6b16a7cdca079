"""The positional schemes by name, without torch: what a method name may start with."""

SCHEMES = ("vanilla", "nope", "rope", "alibi", "relative", "random", "fire", "abacus", "coupling")
IN_ATTENTION = (
    "rope",
    "alibi",
    "relative",
    "fire",
)  # act inside self-attention, not on the embeddings
TODAYS_SCHEMES = (
    "random",
    "fire",
    "abacus",
    "coupling",
)  # the length-generalization schemes of 2023–2024
