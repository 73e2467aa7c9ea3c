"""HTTP monitoring endpoints (/varz, /connz, /subsz, /healthz, /metrics)."""
