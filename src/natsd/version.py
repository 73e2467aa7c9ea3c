"""Version numbers.

``__version__`` is natsd's own. ``SERVER_VERSION`` is the nats-server version whose client
protocol natsd speaks; it goes into INFO because clients gate features on it.
"""

__version__ = "0.1.0"
SERVER_VERSION = "2.11.0"
# The JetStream API level of SERVER_VERSION (ADR-44: 2.11 is level 1). Clients read it from
# $JS.API.INFO (api.level) and stream/consumer metadata (_nats.level) to gate features.
API_LEVEL = 1
PROTO = 1
