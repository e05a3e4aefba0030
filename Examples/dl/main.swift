import Downloader

print("usage: dl [--dir DIR] [--max-active N] [--lifo] [--md5 HEX] [--header 'Name: value']... URL...")
