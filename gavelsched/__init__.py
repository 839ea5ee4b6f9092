"""gavelsched: a heterogeneity-aware scheduler for shared GPU clusters (thesis chapter 5)."""

__version__ = "0.1.0"


def __getattr__(name: str):
    """Lazy exports: ``from gavelsched import GavelIterator`` imports the iterator (and gRPC)
    only when asked, so ``import gavelsched`` stays light."""
    if name == "GavelIterator":
        from .iterator import GavelIterator

        return GavelIterator
    raise AttributeError(f"module 'gavelsched' has no attribute {name!r}")
