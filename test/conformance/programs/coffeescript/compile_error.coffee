x = ->
  return 1 +
)
