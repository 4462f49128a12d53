"""The export stage: pair rows, dataset formats, the dataset card, pre-flight checks, chat templates
and lengths. Everything between a settled state and the files a trainer loads."""
