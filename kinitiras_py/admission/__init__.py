"""Per-request orchestration shared by the webhook, the offline CLI and the benchmarks:
select → resolve references → engine → result. No HTTP here."""
