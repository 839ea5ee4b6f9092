"""gavelsched: a heterogeneity-aware scheduler for shared GPU clusters (thesis chapter 5)."""

__version__ = "0.1.0"
