new File("output.txt").setText(new File("input.txt").getText("UTF-8").toUpperCase(), "UTF-8")
