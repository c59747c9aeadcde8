"""The `boxjax` command (`boxjax train|watch|export|bench|demo`) and its parts."""
