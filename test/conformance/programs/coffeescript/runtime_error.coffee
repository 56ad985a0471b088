throw new Error "boom"
