"""JetStream: streams, consumers and the $JS.API, layered on the router and the stores."""
