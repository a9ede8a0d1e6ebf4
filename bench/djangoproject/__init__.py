"""Django settings for the two Django systems; each worker process loads one of them."""
