// placeholder: Plan report (issue 4)
