ARGV.each { |a| puts a }
