"""The data stage: sources (generated, shipped and CSV/Parquet files) into a :class:`Dataset`, feature encoding,
class-shift weights and competition-shaped synthetic tables.

- :mod:`~qwkboost.data.sources`: ``Dataset``, ``quartiles``, ``chisq``, ``latent_classes``, ``from_file``
- :mod:`~qwkboost.data.features`: ``FeatureSchema``: column names, categorical codes, checks at predict time
- :mod:`~qwkboost.data.shift`: label-shift weights and the test set's class proportions
- :mod:`~qwkboost.data.synthetic`: ``entity_frames``: several rows per entity, for grouped CV
"""

from qwkboost._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    # sources
    "Dataset": "sources",
    "quartiles": "sources",
    "latent_classes": "sources",
    "check_latent_classes_args": "sources",
    "chisq": "sources",
    "from_file": "sources",
    "class_range": "sources",
    "warn_empty_classes": "sources",
    "check_quartiles_args": "sources",
    "check_chisq_args": "sources",
    "read_table": "sources",
    "SOURCES": "sources",
    "SOURCE_KEYS": "sources",
    "SOURCE_CHECKS": "sources",
    "dataset_path": "sources",
    # features
    "FeatureSchema": "features",
    "EncodedFeatures": "features",
    "MAX_CATEGORIES": "features",
    # shift
    "class_proportions": "shift",
    "shift_weights": "shift",
    "shift_proba": "shift",
    "target_moments": "shift",
    # synthetic
    "entity_frames": "synthetic",
    "sources": "",
    "features": "",
    "shift": "",
    "synthetic": "",
})
