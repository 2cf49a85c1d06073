"""The operator commands of `mm2-assets` beside their reports: `replicate` (one pass of every
flow, as Dagster runs), `follow` (every flow's follower in the foreground), `validate` (check
a file and show what it would replicate, with its report in `validate_report`) and `health`
(the alerting's dead man's switch). `mm2_assets/cli.py` parses the command line and calls
them."""
