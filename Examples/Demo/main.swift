import Downloader
import HTTPTestServer

print("downloader-demo: coming with the examples issue")
