import numpy as np

from qwkboost.data.sources import quartiles
from qwkboost.runs.table import ARTICLE_TABLE, bayes_ceiling


def test_bayes_ceiling_bounds_what_a_model_can_reach():
    ds = quartiles(n_train=20000, n_test=20000)
    ceiling = bayes_ceiling(ds)
    # the sum of the visible columns is sufficient; a noisy version of it must do worse
    noisy = type(ds)(ds.X_train + np.random.RandomState(0).normal(0, 0.3, ds.X_train.shape), ds.y_train,
                     ds.X_test + np.random.RandomState(1).normal(0, 0.3, ds.X_test.shape), ds.y_test)
    assert bayes_ceiling(noisy) < ceiling
    # and it sits above every figure the article published
    assert ceiling > max(max(v) for v in ARTICLE_TABLE.values())


def test_article_figures_only_beside_the_articles_protocol():
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from qwkboost.config import apply_protocol
    from qwkboost.runs.table import matches_article

    def row(*overrides):        # as the table composes a row: the article's protocol, then the overrides
        with initialize_config_dir(config_dir=str(__import__("pathlib").Path(__file__).parents[2] / "conf"),
                                   version_base="1.3"):
            cfg = OmegaConf.to_container(compose("config", ["experiment=qwk_table", *overrides]), resolve=True)
        return apply_protocol(cfg, overrides)

    assert matches_article(row("engine=xgboost", "objective=extended_qwk"))
    assert matches_article(row("engine=lightgbm", "objective=squared_error"))
    assert not matches_article(row("engine=native", "objective=squared_error"))     # the article had no native
    assert not matches_article(row("experiment=qwk_table_small"))                    # 20,000 rows, not 100,000
    assert not matches_article(row("engine=xgboost", "data.seed=3"))
    assert not matches_article(row("engine=xgboost", "objective=extended_qwk", "objective.params.clip=hold"))
    assert not matches_article(row("engine=xgboost", "engine.params.learning_rate=0.3"))
    assert not matches_article(row("data=csv", "data.path=x.csv", "data.target=y"))
