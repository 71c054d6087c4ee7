// Placeholder: the expert cache lands here.
