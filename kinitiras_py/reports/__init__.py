"""PolicyReports (``wgpolicyk8s.io/v1alpha2``): rule results on objects, written where dashboards read them.

``build`` turns results into report objects (pure); ``ledger`` keeps the latest results of every
object, scan and admission merged; ``writer`` writes them through the API server (leader only,
rate-limited, coalesced, idempotent); ``sink`` is the interface the scanner and the webhook feed;
``stats`` holds their metrics. Nothing here evaluates policies or serves HTTP.
"""
