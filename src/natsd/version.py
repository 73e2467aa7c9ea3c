"""Version numbers.

``__version__`` is natsd's own. ``SERVER_VERSION`` is the nats-server version whose client
protocol natsd speaks; it goes into INFO because clients gate features on it.
"""

__version__ = "0.1.0"
SERVER_VERSION = "2.10.0"
PROTO = 1
