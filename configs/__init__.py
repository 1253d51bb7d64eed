"""jaxwrite's recipes, one `get_config()` file per recipe and size; installed as `jaxwrite.recipes`
so `jaxwrite train --config NAME` finds them without a checkout (see jaxwrite.common.configfile)."""
