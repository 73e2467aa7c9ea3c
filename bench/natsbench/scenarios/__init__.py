"""The scenario implementations, one module per family; ``natsbench.table`` lists them."""
