"""The Hydra configs; also the package ``qwkboost.conf``, so that :mod:`qwkboost.defaults` reads them."""
