"""An app whose tasks a worker refuses: listed only by proj.settings_wrong when CSL_CLASH is set."""
